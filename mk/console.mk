# worker console: screenshots of its main pages for docs/CONSOLE.md.

.PHONY: console-screenshots
console-screenshots: ## regenerate docs/console/*.png: the console's main pages over the in-memory stores, in headless Chromium (apt-get install chromium)
	@cd tools && $(GO) run ./cmd/consoleshots -out ../docs/console
