// Command node-agent is an agent for deploy/node/example-agent, as its kustomization describes
// one: it follows the pods through the node's informerd (INFORMERD_SOCKET) with its projected
// token (INFORMERD_TOKEN_FILE), with an Informer (a watch that resumes, and relists when the
// epoch changes) and, every few seconds, a List; it prints one line each time, for the
// real-node tests (tools/cmd/node/realnode_test.go) to read with kubectl logs:
//
//	agent node=NODE pods=N foreign=M informer=K epoch=E relists=R full=F
//	    the List's N pods, M of them on another node than NODE_NAME; the Informer's view (K
//	    pods) at epoch E, how many times it relisted (in full or by a delta resume), and how
//	    many of those were in full
//	agent node=NODE error=REASON code=CODE
//	    what informerd answered the List instead
//
// With INFORMERD_ADDRESS (HOST:PORT) it reads a service-mode informerd (deploy/service) over TLS
// instead: the server's certificate checked against INFORMERD_CA_FILE for the name
// INFORMERD_SERVER_NAME, the token sent the same way.
//
// Decision: a module of its own (as tools/cmd/image), so that tools/go.mod, pinned to
// Kubernetes' dependencies, does not take the client's.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	informerd "informerd.io/clients/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func main() {
	node := os.Getenv("NODE_NAME")
	c, err := dial()
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
			fmt.Printf("agent node=%s pods=%d foreign=%d informer=%d epoch=%d relists=%d full=%d\n",
				node, len(res.Items), foreign, s.Objects, s.Token.Epoch, s.Relists+s.DeltaResumes, s.Relists)
		}
		time.Sleep(2 * time.Second)
	}
}

// dial connects to the node's socket, or over TLS to INFORMERD_ADDRESS when it is set.
func dial() (*informerd.Client, error) {
	token := informerd.WithTokenFile(os.Getenv("INFORMERD_TOKEN_FILE"))
	address := os.Getenv("INFORMERD_ADDRESS")
	if address == "" {
		return informerd.Dial(os.Getenv("INFORMERD_SOCKET"), token)
	}
	creds, err := credentials.NewClientTLSFromFile(os.Getenv("INFORMERD_CA_FILE"), os.Getenv("INFORMERD_SERVER_NAME"))
	if err != nil {
		return nil, err
	}
	return informerd.Dial(address, token, informerd.WithGRPCDialOptions(grpc.WithTransportCredentials(creds)))
}

func nodeName(pod map[string]any) string {
	spec, _ := pod["spec"].(map[string]any)
	name, _ := spec["nodeName"].(string)
	return name
}
