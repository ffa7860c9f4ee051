#!/usr/bin/env node
"use strict";
require("../lib/launch").launch("fake-instance");
