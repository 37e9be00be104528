import sys

from torch_cudagraph_debug.cli import main

sys.exit(main())
