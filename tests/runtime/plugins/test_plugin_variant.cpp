// One variant of the test plugin (test_plugin.cpp): its score and the word its "variant"
// feature reports, from BP_TEST_PLUGIN_SCORE and BP_TEST_PLUGIN_VARIANT.

int bp_test_plugin_score();
const char* bp_test_plugin_variant();

int bp_test_plugin_score() { return BP_TEST_PLUGIN_SCORE; }
const char* bp_test_plugin_variant() { return BP_TEST_PLUGIN_VARIANT; }
