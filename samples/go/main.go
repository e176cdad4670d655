// Loads a model, fills its float32 and int64 inputs with a fixed pattern, runs it once and prints
// each output's shape and first values (the Go twin of samples/c/run_model.c).
// Usage: go run . MODEL [DIM ...]   (DIMs fill the dynamic dims in order, default 1)
package main

import (
	"fmt"
	"os"
	"strconv"

	"tern"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s MODEL [DIM ...]\n", os.Args[0])
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path string, dimArgs []string) error {
	fmt.Println("Tern", tern.Version())
	model, err := tern.LoadModel(path)
	if err != nil {
		return err
	}
	defer model.Close()
	session, err := tern.NewSession(model, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	infos, err := model.Inputs()
	if err != nil {
		return err
	}
	inputs := map[string]*tern.Tensor{}
	for _, in := range infos {
		shape := make([]int64, len(in.Shape))
		count := int64(1)
		for i, d := range in.Shape {
			if d < 0 {
				d = 1
				if len(dimArgs) > 0 {
					d, _ = strconv.ParseInt(dimArgs[0], 10, 64)
					dimArgs = dimArgs[1:]
				}
			}
			shape[i] = d
			count *= d
		}
		var t *tern.Tensor
		switch in.DType {
		case tern.Float32:
			data := make([]float32, count)
			for i := range data {
				data[i] = float32(i*7%23)/23 - 0.5
			}
			t, err = tern.NewTensorFloat32(shape, data)
		case tern.Int64:
			data := make([]int64, count)
			for i := range data {
				data[i] = int64(i % 7)
			}
			t, err = tern.NewTensorInt64(shape, data)
		default:
			t, err = tern.NewTensor(in.DType, shape)
		}
		if err != nil {
			return err
		}
		defer t.Close()
		inputs[in.Name] = t
	}
	outInfos, err := model.Outputs()
	if err != nil {
		return err
	}
	names := make([]string, len(outInfos))
	for i, o := range outInfos {
		names[i] = o.Name
	}
	outs, err := session.Run(inputs, names)
	if err != nil {
		return err
	}
	for i, out := range outs {
		fmt.Printf("%s: dtype %d shape %v", names[i], out.DType(), out.Shape())
		if values, err := out.Float32s(); err == nil {
			for j := 0; j < len(values) && j < 6; j++ {
				fmt.Printf(" %g", values[j])
			}
			if len(values) > 6 {
				fmt.Print(" ...")
			}
		}
		fmt.Println()
		out.Close()
	}
	return nil
}
