"""Looking at an artifact or a machine without making one: per-layer profiles (``profile``),
why int8 or fp16 pays or does not (``explain``), the quantization debugger's cross-check
(``crosscheck``) and what this machine can run (``doctor``). Imports measure and below."""
