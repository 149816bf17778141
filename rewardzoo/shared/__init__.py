"""What rewards share: media conversion, device/dtype resolution, safe weight loading, media I/O.

Heavy backends (torch, decoders) are imported inside the functions that need them.
"""
