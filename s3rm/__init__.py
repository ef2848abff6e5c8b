"""The ``s3rm`` admin command: ``s3rm <verb>`` or ``python -m s3rm <verb>`` (:mod:`s3rm.cli`)."""
