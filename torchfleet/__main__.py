import sys

from torchfleet.cli import main

sys.exit(main())
