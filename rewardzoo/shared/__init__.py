"""What rewards share: media conversion and I/O, devices and dtypes, safe weight loading, options, the common backbones.

- ``media``, ``fields``, ``image_ops``, ``video``, ``audio``, ``files`` — media conversion and I/O;
- ``editing`` — an image edit's inputs (source image, optional edit mask), read once for every editing reward;
- ``device`` — devices and dtypes (and one CUDA side stream per device); ``weights`` — safe weight loading; ``options`` — option checks;
- ``imports`` — objects named by a Python path, and the light packages' lazy attributes;
- ``clip``, ``onnx`` — the backbones several reward families use (CLIP / open_clip, ONNX Runtime sessions).

May import only :mod:`rewardzoo.errors`. Heavy backends (torch, decoders) are imported inside the functions that
need them. Code used by one family lives beside it (``rewards/vlm/``, ``rewards/image/``), the network transport
in :mod:`rewardzoo.transport`.
"""
