// Package cv is the YOLO family's kernels with ultralytics' semantics: the
// OpenCV calls ultralytics' training transforms make (cv2.resize,
// cv2.warpAffine, cv2.warpPerspective, cv2.cvtColor between BGR and HSV
// with a LUT between, cv2.copyMakeBorder) computed as the OpenCV that
// ultralytics installs computes them on uint8, and the transforms' own
// numpy arithmetic on the labels (boxes, segments, keypoints in float32).
//
// What goes in and out: images are kernels.Planes (three uint8 planes, R, G,
// B, CHW), where ultralytics holds BGR HWC; OpenCV resamples every channel
// alike, so the planes give its bytes channel by channel, and the colour
// kernels (HSV) read the planes as the channels they are. Labels are
// Instances: boxes XYXY in pixels, float32, as ultralytics holds them after
// convert_bbox("xyxy") and denormalize. Every function takes plain
// arguments (the drawn parameters), never a pipeline Step or Op: the ops
// that draw them are the pipeline's.
//
// The reference is pinned (python/requirements-dev.txt: ultralytics
// 8.4.190, opencv-python 5.0.0.93) and python/tests/test_yolo_kernels.py
// runs both on real photos; docs in each file say which results are
// OpenCV's bytes and which are within a stated tolerance, and why.
//
// Floating point: every product that is added is either rounded first
// (float64(x*y) + z, float32(x*y) + z) or is a fused multiply-add on
// purpose (math.FMA), where OpenCV's SIMD code fuses it, so that no
// compiler contraction changes a byte (internal/fmacheck).
//
// C: with cgo, the pixel loops of the warps, RandomHSV and ResizeLinear
// run in C (cv.c, cv_warp.h; the warp and the resize's column pass with
// AVX2, the warp's arithmetic in AVX-512 where the CPU has it), each the
// same bytes as its Go twin (warpGo, hsvPixelsGo, resizeLinearGo), which
// the CGO_ENABLED=0 build runs and c_test.go compares it with. The C
// fuses only where the Go calls math.FMA (fma() on double operands, as
// fma32 computes), its files built without contraction.
package cv
