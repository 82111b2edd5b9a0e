"""Video data for RINCE's video experiments: UCF101 / HMDB51 split-1 readers (frame folders or video
files), the x_f / x_s / x_v clip sampler, batched clip augmentation, synthetic sets and the
`mini` moving-MNIST-digits set. Importing this package needs no PyAV; decoding video files does."""

from semcl.data.video.mnist_motion import CLASS_NAMES as MNIST_MOTION_CLASSES
from semcl.data.video.mnist_motion import write_mnist_motion
from semcl.data.video.sampler import ClipPlan, ClipSampler
from semcl.data.video.synthetic import write_synthetic_video
from semcl.data.video.videoset import VIDEO_DATASETS, VideoSet, load_video_split
from semcl.data.views.clip_augment import KINETICS_STATS, TEST_RECIPE, VIDEO_RECIPE, ClipAugment

__all__ = [
    "KINETICS_STATS",
    "MNIST_MOTION_CLASSES",
    "TEST_RECIPE",
    "VIDEO_DATASETS",
    "VIDEO_RECIPE",
    "ClipAugment",
    "ClipPlan",
    "ClipSampler",
    "VideoSet",
    "load_video_split",
    "write_mnist_motion",
    "write_synthetic_video",
]
