"""A user's Hugging Face classifiers, as ``module:factory`` specs point at them
(``hf_models:vit``): transformers models built from small configs with random weights (no
download), returned as they come, ``ModelOutput`` and all. 3x32x32 where the model takes it."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers

# transformers initialises with std 0.02: an untrained head then scores every class nearly alike,
# and int8 rounding alone reorders them. A wider spread gives the classes distinct scores.
SPREAD = {"initializer_range": 0.2}
CIFAR10 = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
LABELS = {"id2label": dict(enumerate(CIFAR10)), "label2id": {n: i for i, n in enumerate(CIFAR10)}}


def _built(model_class: type, config: transformers.PretrainedConfig) -> torch.nn.Module:
    torch.manual_seed(0)
    model = model_class(config)
    _settle_batch_norms(model, config)
    return model.eval()


def _settle_batch_norms(model: torch.nn.Module, config: transformers.PretrainedConfig) -> None:
    """Random weights leave BatchNorm's running statistics at mean 0, variance 1, far from what
    its inputs hold: MobileViT's and EfficientNet's logits then come out near 1e-3 and 1e-22,
    the same for every image. One pass over seeded random images sets them, as training would."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a plain average over the pass
    size = getattr(config, "image_size", 32)
    images = torch.rand(
        16,
        getattr(config, "num_channels", 3),
        size,
        size,
        generator=torch.Generator().manual_seed(0),
    )
    with torch.no_grad():
        model.train()(pixel_values=images)
    for norm in norms:
        norm.momentum = 0.1


def vit_config(**labels) -> transformers.ViTConfig:
    return transformers.ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, **SPREAD, **(labels or LABELS),
    )  # fmt: skip


def vit() -> torch.nn.Module:
    return _built(transformers.ViTForImageClassification, vit_config())


def deit() -> torch.nn.Module:
    config = transformers.DeiTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.DeiTForImageClassification, config)


def beit() -> torch.nn.Module:
    """BEiT with its relative position bias: integer arithmetic on the position index inside
    the graph PT2E quantizes."""
    config = transformers.BeitConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, use_relative_position_bias=True,
        **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.BeitForImageClassification, config)


def convnext() -> torch.nn.Module:
    config = transformers.ConvNextConfig(
        num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
        image_size=32, **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.ConvNextForImageClassification, config)


def resnet() -> torch.nn.Module:
    """ResNet's config has no image_size: the input shape comes from the data."""
    config = transformers.ResNetConfig(
        num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
        layer_type="basic", **LABELS,
    )  # fmt: skip
    return _built(transformers.ResNetForImageClassification, config)


def mobilevit() -> torch.nn.Module:
    config = transformers.MobileViTConfig(
        image_size=32, patch_size=2, hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48], num_attention_heads=2, **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.MobileViTForImageClassification, config)


def efficientnet() -> torch.nn.Module:
    config = transformers.EfficientNetConfig(
        image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320, **SPREAD,
        **LABELS,
    )  # fmt: skip
    return _built(transformers.EfficientNetForImageClassification, config)


def swin() -> torch.nn.Module:
    config = transformers.SwinConfig(
        image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.SwinForImageClassification, config)


def swinv2() -> torch.nn.Module:
    """SwinV2's continuous position bias: an integer index into a table, through a sigmoid
    whose int8 output TFLite takes at one scale only."""
    config = transformers.Swinv2Config(
        image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
        window_size=4, **SPREAD, **LABELS,
    )  # fmt: skip
    return _built(transformers.Swinv2ForImageClassification, config)


def pp_lcnet() -> torch.nn.Module:
    """transformers' PPLCNetForImageClassification returns its head's output as
    ``last_hidden_state``: it has no ``logits``."""
    blocks = [[[3, 8, 8, 1, False]], [[3, 8, 8, 2, False]], [[3, 8, 16, 2, False]],
              [[3, 16, 16, 2, False]], [[3, 16, 16, 2, True]]]  # fmt: skip
    config = transformers.PPLCNetConfig(
        block_configs=blocks, stem_channels=8, class_expand=32, depths=[1] * 5, **LABELS
    )
    return _built(transformers.PPLCNetForImageClassification, config)


def save_vit_folder(folder: Path, labels: tuple[str, ...], preprocessor: dict) -> Path:
    """What a user's Trainer run leaves: ``save_pretrained`` of the model and its image
    processor's ``preprocessor_config.json``."""
    names = dict(enumerate(labels))
    config = vit_config(id2label=names, label2id={n: i for i, n in names.items()})
    _built(transformers.ViTForImageClassification, config).save_pretrained(folder)
    transformers.ViTImageProcessorPil(**preprocessor).save_pretrained(folder)
    return folder


def save_colour_images(
    folder: Path, labels: tuple[str, ...], per_class: int, seed: int, size: int = 40
) -> Path:
    """The user's own images for a folder model: smooth random colour PNGs of ``size`` pixels
    (another size than the model's), ``per_class`` in one folder per label."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for index, name in enumerate(labels):
        (folder / name).mkdir(parents=True)
        for number in range(per_class):
            pixels = rng.integers(0, 256, (5, 5, 3)).astype(np.uint8)
            image = Image.fromarray(pixels).resize((size, size), Image.BILINEAR)
            image.save(folder / name / f"{index}-{number}.png")
    return folder


def save_imagegpt_folder(folder: Path) -> Path:
    """ImageGPT classifies an image given as colour-cluster token ids, not as pixels."""
    config = transformers.ImageGPTConfig(
        vocab_size=17, n_positions=16, n_embd=8, n_layer=1, n_head=2, **LABELS
    )
    _built(transformers.ImageGPTForImageClassification, config).save_pretrained(folder)
    return folder


def save_perceiver_folder(folder: Path) -> Path:
    """Perceiver's classifier takes ``inputs`` first and the image as ``pixel_values`` by name."""
    config = transformers.PerceiverConfig(
        d_model=32, num_latents=8, d_latents=16, num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=2, num_cross_attention_heads=1, image_size=16, **LABELS,
    )  # fmt: skip
    _built(transformers.PerceiverForImageClassificationLearned, config).save_pretrained(folder)
    return folder
