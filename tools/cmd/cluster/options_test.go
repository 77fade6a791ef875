package main

import (
	"slices"
	"testing"
)

func TestWithoutControllerManagerTheServiceAccountAdmissionPluginIsOff(t *testing.T) {
	if args := envtestArgs(options{controllerManager: true}); len(args) != 0 {
		t.Errorf("with the controller manager: %v, want no extra apiserver flags", args)
	}
	args := envtestArgs(options{controllerManager: false})
	if i := slices.Index(args, "--disable-admission-plugins"); i < 0 || i+1 >= len(args) || args[i+1] != "ServiceAccount" {
		t.Errorf("without the controller manager: %v, want --disable-admission-plugins ServiceAccount", args)
	}
}
