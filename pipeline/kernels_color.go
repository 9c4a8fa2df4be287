package pipeline

// The photometric kernels: torchvision.transforms.v2.functional's ops on
// uint8 images, in place on planes. STUBS: the photometric helper fills
// them in (each with torchvision's semantics, deterministic on every
// machine, allocation-free once opScratch is warm).

// adjustBrightness is adjust_brightness(img, f).
func adjustBrightness(p planes, f float64) {}

// adjustContrast is adjust_contrast(img, f).
func adjustContrast(p planes, f float64) {}

// adjustSaturation is adjust_saturation(img, f).
func adjustSaturation(p planes, f float64) {}

// adjustHue is adjust_hue(img, f), f in [-0.5, 0.5].
func adjustHue(p planes, f float64, s *opScratch) {}

// adjustSharpness is adjust_sharpness(img, f).
func adjustSharpness(p planes, f float64, s *opScratch) {}

// rgbToGrayscale is rgb_to_grayscale(img, num_output_channels=3).
func rgbToGrayscale(p planes) {}

// solarize is solarize(img, threshold).
func solarize(p planes, threshold float64) {}

// solarizeAdd is timm's solarize_add(img, addition, threshold).
func solarizeAdd(p planes, addition int, threshold float64) {}

// posterize is posterize(img, bits).
func posterize(p planes, bits int) {}

// invert is invert(img).
func invert(p planes) {}

// equalize is equalize(img).
func equalize(p planes, s *opScratch) {}

// autocontrast is autocontrast(img).
func autocontrast(p planes) {}
