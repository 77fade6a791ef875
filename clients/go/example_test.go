package informerd_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"

	informerd "informerd.io/clients/go"
)

// A controller's reads: one pod, the pods of a namespace, and an informer over them.
func Example() {
	ctx := context.Background()
	c, err := informerd.Dial("") // unix:///run/informerd/informerd.sock
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	pod, err := informerd.GetAs[corev1.Pod](ctx, c, "pods", "web", "web-0")
	if informerd.IsNotFound(err) {
		fmt.Println("no web-0")
	} else if err != nil {
		log.Fatal(err)
	} else {
		fmt.Println(pod.Spec.NodeName)
	}

	pods, err := informerd.ListAs[corev1.Pod](ctx, c, "pods",
		informerd.InNamespace("web"), informerd.WithLabelSelector("tier=keep"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(pods.Items), "pods at", pods.Token)

	inf := informerd.NewInformer[corev1.Pod](c, "pods", informerd.HandlerFuncs[corev1.Pod]{
		AddFunc: func(p *corev1.Pod) { fmt.Println("add", p.Name) },
		UpdateFunc: func(old informerd.Meta, p *corev1.Pod) {
			fmt.Println("update", p.Name, old.ResourceVersion, "->", p.ResourceVersion)
		},
		DeleteFunc: func(old informerd.Meta, _ *corev1.Pod) { fmt.Println("delete", old.Key()) },
	}, informerd.InNamespace("web"), informerd.WithPredicates(informerd.GenerationChanged))
	if err := inf.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
