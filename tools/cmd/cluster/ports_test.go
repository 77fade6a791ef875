package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestFreePortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(6, 0)
	if err != nil {
		t.Fatal(err)
	}
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		low, _ = strconv.Atoi(strings.Fields(string(b))[0])
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice: %v", p, ports)
		}
		seen[p] = true
		if low > 10000 && p >= low {
			t.Errorf("port %d is in the ephemeral range from %d", p, low)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}
