#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| air_fuzz::campaigns(data));
