import sys

from nbtoolkit.train.program import main

sys.exit(main())
