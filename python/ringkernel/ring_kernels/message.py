from ..messages import (RingKernelMessage, deserialize_message,  # noqa: F401
                        get_message_type, message)
