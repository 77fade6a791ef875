// Command node-agent is an agent for deploy/node/example-agent, as its kustomization describes
// one: every few seconds it lists the pods through the node's informerd (INFORMERD_SOCKET) with
// its projected token (INFORMERD_TOKEN_FILE) and prints one line of what it got, for the
// real-node tests (tools/cmd/node/realnode_test.go) to read with kubectl logs:
//
//	agent node=NODE pods=N foreign=M       M of the N pods are on another node than NODE_NAME
//	agent node=NODE error=REASON code=CODE what informerd answered instead
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
)

func main() {
	node := os.Getenv("NODE_NAME")
	c, err := informerd.Dial(os.Getenv("INFORMERD_SOCKET"), informerd.WithTokenFile(os.Getenv("INFORMERD_TOKEN_FILE")))
	if err != nil {
		fmt.Printf("agent node=%s error=dial code=%v %v\n", node, informerd.Code(err), err)
		os.Exit(1)
	}
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
			fmt.Printf("agent node=%s pods=%d foreign=%d synced=%v\n", node, len(res.Items), foreign, res.Synced)
		}
		time.Sleep(3 * time.Second)
	}
}

func nodeName(pod map[string]any) string {
	spec, _ := pod["spec"].(map[string]any)
	name, _ := spec["nodeName"].(string)
	return name
}
