#pragma once
// Fixture for the layering test: the two codecs know nothing of each other; the connection
// picks one (by ALPN) and talks to it through the seam alone.
#include "proxy/session/http2/http2_server_codec.h"
