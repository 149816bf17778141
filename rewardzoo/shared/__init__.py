"""What rewards share: media conversion and I/O, devices and dtypes, safe weights, checkpoints, options.

- ``media``, ``image_ops``, ``video``, ``audio``, ``files``, ``editing`` — media conversion and I/O;
- ``device`` — devices, dtypes, CUDA side streams; ``weights`` — safe weight loading; ``checkpoints`` — checkpoint
  sizes read without loading; ``torchscript`` — a TorchScript archive's tensors and code text, read without running
  it; ``options`` — option checks; ``hub`` — whether the hub can be reached (one request per process);
  ``lockfile`` — the lock file of fetched weights;
- ``imports`` — objects named by a Python path, lazy attributes; ``score_stats``, ``agreement`` — score summaries;
- ``groups`` — grouping by ``group_id`` (the key a group id is compared by).

No model lives here: the backbones several families use (CLIP, DINO, timm, ONNX sessions, the VLM and text runtimes)
are the models floor, :mod:`rewardzoo.rewards.models`. May import only :mod:`rewardzoo.errors`; heavy backends are
imported inside the functions that need them.
"""
