"""Makes the repository root importable and keeps TensorFlow quiet in tests."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
