#pragma once
// Fixture for the layering test: nothing but main.cc sits at the root of proxy/; code lives in
// a module's folder.
