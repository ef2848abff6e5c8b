"""``python -m s3rm.audit``: the audit without the rest of the ``s3rm`` command."""
import sys

from s3rm.audit import main

if __name__ == "__main__":
    sys.exit(main())
