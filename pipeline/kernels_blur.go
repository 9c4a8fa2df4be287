package pipeline

// gaussianBlur is gaussian_blur(img, kernel_size=[kx, ky], sigma=[sx, sy]).
// STUB: the photometric helper fills it in.
func gaussianBlur(p planes, kx, ky int, sx, sy float64, s *opScratch) {}
