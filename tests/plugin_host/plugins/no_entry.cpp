// A shared library without the troupe_plugin_entry symbol.
extern "C" int troupe_test_not_an_entry() { return 7; }
