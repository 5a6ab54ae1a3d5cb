from ..validators import *  # noqa: F401,F403
