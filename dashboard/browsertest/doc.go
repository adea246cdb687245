// Package browsertest drives the dashboard in a headless Chromium: its tests
// load the page, follow the live stream and read what the page shows. It is
// a module of its own so that the browser driver (chromedp) is a dependency
// of these tests only, never of a program that serves the dashboard. The
// tests start Debian's chromium themselves and skip, saying so, where it is
// not installed.
package browsertest
