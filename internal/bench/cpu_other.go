//go:build !unix

package bench

import "math"

// processCPU is not measured here: NaN, which the table leaves out.
func processCPU() float64 { return math.NaN() }
