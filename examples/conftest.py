# The examples import the repository's adapters as plain functions (scripts/adapters/).
import os
import sys

ADAPTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "adapters")
sys.path.insert(0, ADAPTERS)
