//go:build unix && !linux

package main

import "syscall"

// Only Linux has a parent-death signal; and the terminal is not handed
// to CMD's group elsewhere (a CMD that reads the terminal stops).
func setDeathSignal(*syscall.SysProcAttr) {}

func foregroundTTY() (int, bool) { return -1, false }

func takeTerminal(int) {}
