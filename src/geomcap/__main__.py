import sys

from geomcap.cli import main

sys.exit(main())
