"""Support code the labs import (not the labs' answers)."""
