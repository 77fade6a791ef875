// Command node-agent is an agent for deploy/node/example-agent, as its kustomization describes
// one: it follows the pods through the node's informerd (INFORMERD_SOCKET) with its projected
// token (INFORMERD_TOKEN_FILE), with an Informer (a watch that resumes, and relists when the
// epoch changes) and, every few seconds, a List; it prints one line each time, for the
// real-node tests (tools/cmd/node/realnode_test.go) to read with kubectl logs:
//
//	agent node=NODE pods=N foreign=M informer=K epoch=E relists=R
//	    the List's N pods, M of them on another node than NODE_NAME; the Informer's view (K
//	    pods) at epoch E, and how many times it relisted (in full or by a delta resume)
//	agent node=NODE error=REASON code=CODE
//	    what informerd answered the List instead
//
// Decision: a module of its own (as tools/cmd/image), so that tools/go.mod, pinned to
// Kubernetes' dependencies, does not take the client's.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	informerd "informerd.io/clients/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func main() {
	node := os.Getenv("NODE_NAME")
	c, err := informerd.Dial(os.Getenv("INFORMERD_SOCKET"), informerd.WithTokenFile(os.Getenv("INFORMERD_TOKEN_FILE")))
	if err != nil {
		fmt.Printf("agent node=%s error=dial code=%v %v\n", node, informerd.Code(err), err)
		os.Exit(1)
	}
	inf := informerd.NewInformer[unstructured.Unstructured](c, "pods", informerd.HandlerFuncs[unstructured.Unstructured]{})
	go func() { _ = inf.Run(context.Background()) }()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.List(ctx, "pods")
		cancel()
		if err != nil {
			fmt.Printf("agent node=%s error=%s code=%v\n", node, informerd.Reason(err), informerd.Code(err))
		} else {
			foreign := 0
			for _, p := range res.Items {
				if nodeName(p.Object) != node {
					foreign++
				}
			}
			s := inf.Stats()
			fmt.Printf("agent node=%s pods=%d foreign=%d informer=%d epoch=%d relists=%d\n",
				node, len(res.Items), foreign, s.Objects, s.Token.Epoch, s.Relists+s.DeltaResumes)
		}
		time.Sleep(2 * time.Second)
	}
}

func nodeName(pod map[string]any) string {
	spec, _ := pod["spec"].(map[string]any)
	name, _ := spec["nodeName"].(string)
	return name
}
