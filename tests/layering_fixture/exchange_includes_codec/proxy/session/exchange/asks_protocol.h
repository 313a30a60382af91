#pragma once
// Fixture for the layering test: an exchange knows no codec. It talks to a Downstream and an
// UpstreamChannel; which HTTP the client speaks is the codec's, behind the connection's seam.
#include "proxy/session/codec/client_codec.h"
