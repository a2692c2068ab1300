import sys

from streamlake.cli import main

sys.exit(main())
