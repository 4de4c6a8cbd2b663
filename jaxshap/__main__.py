"""``python -m jaxshap`` runs the demo."""

import sys

from ._demo import main

sys.exit(main())
