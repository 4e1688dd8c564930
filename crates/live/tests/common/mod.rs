//! Shared helpers for the galleon-live tests: the headless-Chromium WebDriver harness.
#![allow(dead_code, unreachable_pub)]

pub mod browser_server;
pub mod serve;
pub mod webdriver;
