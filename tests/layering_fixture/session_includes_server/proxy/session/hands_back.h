#pragma once
// Fixture for the layering test: a session never reaches up to the server that owns it; it
// hands itself back through WorkerContext::finished.
#include "proxy/server/worker.h"
