#pragma once
// Fixture for the layering test: the generation sessions judge by lives below them, so
// runtime/ never includes session/.
#include "proxy/session/client_connection.h"
