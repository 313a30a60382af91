#pragma once
// Fixture for the layering test: policy/ must never include the event loop.
#include <uv.h>
