"""What rewards share: media conversion and I/O, devices and dtypes, safe weights, options, common backbones.

- ``media``, ``image_ops``, ``video``, ``audio``, ``files``, ``editing`` — media conversion and I/O;
- ``device`` — devices, dtypes, CUDA side streams; ``weights`` — safe weight loading; ``torchscript`` — a TorchScript
  archive's tensors and code text, read without running it; ``options`` — option checks;
- ``imports`` — objects named by a Python path, lazy attributes; ``score_stats`` — score summaries;
- ``groups`` — grouping by ``group_id`` (the key a group id is compared by);
- ``clip``, ``dino``, ``timm_backbone``, ``onnx`` — backbones several reward families use.

May import only :mod:`rewardzoo.errors`; heavy backends are imported inside the functions that need them.
"""
