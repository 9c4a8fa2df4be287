# Vendored from github.com/facebookresearch/dinov2 at b8931f7bf91576930313be2c6d6af376033b35f0: a package for
# dinov2/data/augmentations.py and transforms.py (DINOv2's own __init__ files import its
# models and loaders, left out). Licensed under the Apache License, Version 2.0 (DINOv2's LICENSE).
