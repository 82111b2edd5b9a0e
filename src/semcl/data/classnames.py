"""Class-name tables of the supported datasets.

The readers take names from the dataset files themselves where the format stores them
(CIFAR ``meta`` pickles, TinyImageNet ``words.txt``); the IDX formats store no names, so
the tables below are the only source for MNIST and Fashion-MNIST. The synthetic writer
uses the same tables so that generated data looks like the real thing to every reader.
"""

from __future__ import annotations

# CIFAR-100 superclasses and their five members each, as published with the dataset.
# Fine and coarse label ids are the alphabetical positions of the names (that is how the
# official ``meta`` file orders them), so the fine→coarse map is derived, not hard-coded.
CIFAR100_SUPERCLASSES: dict[str, tuple[str, ...]] = {
    "aquatic_mammals": ("beaver", "dolphin", "otter", "seal", "whale"),
    "fish": ("aquarium_fish", "flatfish", "ray", "shark", "trout"),
    "flowers": ("orchid", "poppy", "rose", "sunflower", "tulip"),
    "food_containers": ("bottle", "bowl", "can", "cup", "plate"),
    "fruit_and_vegetables": ("apple", "mushroom", "orange", "pear", "sweet_pepper"),
    "household_electrical_devices": ("clock", "keyboard", "lamp", "telephone", "television"),
    "household_furniture": ("bed", "chair", "couch", "table", "wardrobe"),
    "insects": ("bee", "beetle", "butterfly", "caterpillar", "cockroach"),
    "large_carnivores": ("bear", "leopard", "lion", "tiger", "wolf"),
    "large_man-made_outdoor_things": ("bridge", "castle", "house", "road", "skyscraper"),
    "large_natural_outdoor_scenes": ("cloud", "forest", "mountain", "plain", "sea"),
    "large_omnivores_and_herbivores": ("camel", "cattle", "chimpanzee", "elephant", "kangaroo"),
    "medium_mammals": ("fox", "porcupine", "possum", "raccoon", "skunk"),
    "non-insect_invertebrates": ("crab", "lobster", "snail", "spider", "worm"),
    "people": ("baby", "boy", "girl", "man", "woman"),
    "reptiles": ("crocodile", "dinosaur", "lizard", "snake", "turtle"),
    "small_mammals": ("hamster", "mouse", "rabbit", "shrew", "squirrel"),
    "trees": ("maple_tree", "oak_tree", "palm_tree", "pine_tree", "willow_tree"),
    "vehicles_1": ("bicycle", "bus", "motorcycle", "pickup_truck", "train"),
    "vehicles_2": ("lawn_mower", "rocket", "streetcar", "tank", "tractor"),
}

CIFAR100_COARSE_NAMES: list[str] = sorted(CIFAR100_SUPERCLASSES)
CIFAR100_FINE_NAMES: list[str] = sorted(n for m in CIFAR100_SUPERCLASSES.values() for n in m)
CIFAR100_FINE_TO_COARSE: list[int] = [
    next(ci for ci, c in enumerate(CIFAR100_COARSE_NAMES) if fine in CIFAR100_SUPERCLASSES[c])
    for fine in CIFAR100_FINE_NAMES
]

CIFAR10_NAMES: list[str] = [
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip
# CIFAR-10 ships no superclasses; the synthetic writer still needs a visual grouping so
# its images have two-level structure. Vehicles versus animals is the natural split.
CIFAR10_SYNTHETIC_GROUPS: list[int] = [0, 0, 1, 1, 1, 1, 1, 1, 0, 0]

FASHION_MNIST_NAMES: list[str] = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
# Superclasses used for RINCE's second rank on Fashion-MNIST.
FASHION_MNIST_COARSE_NAMES: list[str] = ["upper_body", "trouser", "dress", "footwear", "bag"]
FASHION_MNIST_FINE_TO_COARSE: list[int] = [0, 1, 0, 2, 0, 3, 0, 3, 4, 3]

MNIST_NAMES: list[str] = [str(d) for d in range(10)]
# Synthetic-only grouping (MNIST has no superclasses): pairs of digits share traits.
MNIST_SYNTHETIC_GROUPS: list[int] = [d // 2 for d in range(10)]

# TinyImageNet synthetic layout: 200 classes in 20 visual groups of 10.
TINYIMAGENET_NUM_CLASSES = 200
TINYIMAGENET_SYNTHETIC_GROUP_SIZE = 10


def tinyimagenet_synthetic_wnid(index: int) -> str:
    """Made-up but well-formed WordNet id ('n' + 8 digits) for synthetic class ``index``."""
    return f"n{90000000 + index:08d}"
