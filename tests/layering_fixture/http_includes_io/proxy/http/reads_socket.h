#pragma once
// Fixture for the layering test: protocol code is sans-IO, so http/ never includes io/.
#include "proxy/io/tcp_stream.h"
