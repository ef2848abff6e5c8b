"""``python -m s3rm``: the same as the ``s3rm`` console script."""
import sys

from s3rm.cli import main

if __name__ == "__main__":
    sys.exit(main())
