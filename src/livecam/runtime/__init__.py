"""ONNX Runtime: provider selection and the shared session pool."""
