"""Small configs of the pinned transformers' image classifiers: each architecture's own config
class with its sizes cut down (layers to one per stage, widths to 16-128, images to 32 or 64
pixels), so that its modules, ops and control flow are the real ones and an export takes
seconds. Random weights; nothing is downloaded."""

from __future__ import annotations

from typing import Any

# every field a config has among these is set (the transformer encoders' common names)
COMMON: dict[str, Any] = {
    "image_size": 32,
    "num_channels": 3,
    "num_labels": 10,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "patch_size": 8,
    "initializer_range": 0.2,  # an untrained head then scores the classes apart (tests/hf_models)
}
# what only a plain encoder means: a per-stage model aliases some (num_hidden_layers is
# ConvNeXt's stage count) and keeps its own stem stride
ENCODER_ONLY = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "patch_size",
)
# lists of one entry per stage: depths to 1, widths doubling from 16, heads to 1
PER_STAGE_ONE = ("depths", "num_heads", "depth", "num_attention_heads_per_stage")
PER_STAGE_WIDTH = ("hidden_sizes", "embed_dims", "embed_dim_per_stage")

# models whose stage widths come from lists of their own beside hidden_sizes: kept
OWN_WIDTHS = {"hgnet_v2", "textnet"}
# Swin and its variants (SwinV2, Donut's encoder): 4-pixel patches, windows of 4, two stages
SWIN = {
    "embed_dim": 16,
    "patch_size": 4,
    "window_size": 4,
    "depths": [1, 1],
    "num_heads": [1, 2],
}
# what the common rules cannot guess, by model_type
OVERRIDES: dict[str, dict[str, Any]] = {
    "beit": {"use_relative_position_bias": True},  # the integer position index: int8's hard case
    "data2vec-vision": {"use_relative_position_bias": True},
    "bit": {
        "embedding_size": 32,
        "hidden_sizes": [128, 128, 256, 256],
        "layer_type": "preactivation",
    },
    "resnet": {"embedding_size": 16},
    "textnet": {"image_size": 64},
    "regnet": {"embedding_size": 16, "groups_width": 8},
    "swin": SWIN,
    "swinv2": SWIN,
    "donut-swin": SWIN,
    "focalnet": {"embed_dim": 16, "patch_size": 4, "depths": [1, 1], "hidden_sizes": [16, 32]},
    "efficientnet": {"width_coefficient": 0.25, "depth_coefficient": 0.25, "hidden_dim": 320},
    "mobilenet_v1": {"depth_multiplier": 0.25},
    "mobilenet_v2": {"depth_multiplier": 0.25},
    "mobilevit": {
        "image_size": 64,
        "patch_size": 2,
        "hidden_sizes": [32, 48, 64],
        "neck_hidden_sizes": [8, 8, 16, 16, 24, 32, 64],
    },
    "mobilevitv2": {"image_size": 64, "patch_size": 2, "width_multiplier": 0.25},
    "levit": {
        "image_size": 64,
        "hidden_sizes": [32, 48, 64],
        "num_attention_heads": [1, 1, 1],
        "depths": [1, 1, 1],
        "key_dim": [8, 8, 8],
    },
    "hiera": {
        "image_size": [64, 64],
        "embed_dim": 16,
        "patch_size": [4, 4],
        "patch_padding": [0, 0],
        "depths": [1, 1],
        "num_heads": [1, 1],
        "query_stride": [2, 2],
        "masked_unit_size": [4, 4],
        "embed_dim_multiplier": 2.0,
        "num_query_pool": 1,
    },
    # depth[i] > i: CvT indexes its drop-path rates by stage inside each stage
    "cvt": {"embed_dim": [16, 32, 64], "num_heads": [1, 1, 2], "depth": [1, 2, 3]},
    "pvt": {
        "hidden_sizes": [16, 32, 64, 128],
        "num_attention_heads": [1, 1, 2, 2],
        "depths": [1, 1, 1, 1],
    },
    "pvt_v2": {
        "hidden_sizes": [16, 32, 64, 128],
        "num_attention_heads": [1, 1, 2, 2],
        "depths": [1, 1, 1, 1],
    },
    "segformer": {
        "hidden_sizes": [16, 32, 64, 128],
        "num_attention_heads": [1, 1, 2, 2],
        "depths": [1, 1, 1, 1],
        "decoder_hidden_size": 32,
    },
    "swiftformer": {"embed_dims": [16, 32, 64, 128], "depths": [1, 1, 1, 1]},
    "poolformer": {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]},
    "imagegpt": {"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64},
    "perceiver": {
        "d_model": 32,
        "num_latents": 16,
        "d_latents": 32,
        "num_blocks": 1,
        "num_self_attends_per_block": 1,
        "num_self_attention_heads": 2,
        "num_cross_attention_heads": 1,
    },
}
# model types whose config holds a vision config of its own (a vision tower beside text)
VISION_TOWER = {"clip", "siglip", "siglip2", "metaclip_2"}


def _shrunk(config: Any) -> dict[str, Any]:
    """The small sizes for ``config``'s fields, as constructor arguments: the config class then
    derives what depends on them (stage names, backbone outputs) itself."""
    sizes: dict[str, Any] = {}
    widths = any(isinstance(getattr(config, n, None), (list, tuple)) for n in PER_STAGE_WIDTH)
    for name, value in COMMON.items():
        if widths and name in ENCODER_ONLY:
            continue  # a per-stage model's sizes are its lists (num_hidden_layers: its stages)
        if hasattr(config, name) and not isinstance(getattr(config, name), (list, tuple)):
            sizes[name] = value
    for name in PER_STAGE_ONE:
        value = getattr(config, name, None)
        if isinstance(value, (list, tuple)):
            sizes[name] = [1] * len(value)
    for name in PER_STAGE_WIDTH:
        value = getattr(config, name, None)
        if type(config).model_type in OWN_WIDTHS:
            break
        if isinstance(value, (list, tuple)):
            sizes[name] = [min(16 * 2**i, 128) for i in range(len(value))]
    return sizes


def small_config(model_type: str) -> Any:
    """``model_type``'s config, small; raises whatever transformers raises for a bad one."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    default = config_class()
    if model_type in VISION_TOWER:
        vision = {**default.vision_config.to_dict(), **_shrunk(default.vision_config)}
        text = {**default.text_config.to_dict(), **_shrunk(default.text_config)}
        return config_class(vision_config=vision, text_config=text, num_labels=10)
    sizes = {**_shrunk(default), **OVERRIDES.get(model_type, {}), "num_labels": 10}
    return config_class(**sizes)
