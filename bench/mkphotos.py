"""Build an ImageNet-like JPEG corpus (ImageFolder layout) from real photographs:
the benchmarks' photos (BENCHMARKS.md, "The photos"), and testdata/photos.
usage: bench/mkphotos.py OUT N SEED SRC_GLOB...   (needs Pillow and numpy: .venv has them)
Each source photo is one class; each sample is a random crop of it, resized to an
ImageNet-like size (shorter side ~250-500 px), with mild sensor-like noise, saved as
baseline JPEG 4:2:0 at quality 88-96."""
import random, glob, os, sys
import numpy as np
from PIL import Image
out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(seed); rng = np.random.default_rng(seed)
paths = []
for g in sys.argv[4:]: paths += glob.glob(g)
best = {}
for s in sorted(set(paths)):
    k = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(s)))) if '/contents/images/' in s else os.path.splitext(os.path.basename(s))[0]
    k = ''.join(ch if ch.isalnum() else '_' for ch in k).lower()
    w, h = Image.open(s).size
    if k not in best or w*h > best[k][1]: best[k] = (s, w*h)
classes = sorted(best)
ims = {c: Image.open(best[c][0]).convert('RGB') for c in classes}
print(len(classes), 'classes')
tot = 0
for i in range(n):
    c = classes[i % len(classes)]; im = ims[c]; W, H = im.size
    tw = random.randint(300, 500); th = int(tw*random.uniform(0.66, 1.0))
    if random.random() < 0.3: tw, th = th, tw
    cw = int(W*random.uniform(0.25, 1.0)); ch = int(cw*th/tw)
    if ch > H: ch = H; cw = int(ch*tw/th)
    x = random.randint(0, W-cw); y = random.randint(0, H-ch)
    s = im.crop((x, y, x+cw, y+ch)).resize((tw, th), Image.BILINEAR)
    a = np.asarray(s).astype(np.int16) + rng.normal(0, random.uniform(3, 9), (th, tw, 3)).astype(np.int16)
    s = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    d = os.path.join(out, c); os.makedirs(d, exist_ok=True)
    p = os.path.join(d, f'{i:06d}.jpg'); s.save(p, quality=random.randint(88, 96)); tot += os.path.getsize(p)
print('images', n, 'avg bytes', int(tot/n))
