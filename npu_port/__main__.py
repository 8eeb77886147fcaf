from npu_port.transpiler.entry import main

main()
